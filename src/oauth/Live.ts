/**
 * The OAuth server's services as one layer (decisions §22): resource servers, clients, the browser
 * flow and the token endpoints. Its requirements (the gate, authorization, grants, keys, events,
 * the audit chain, API keys, the CIMD fetch port) are left in its type for src/Server.ts to give.
 */
import { Layer } from "effect"
import { CimdLive } from "./Cimd.ts"
import { ClientsLive } from "./Clients.ts"
import { FlowLive } from "./Flow.ts"
import { ResourceServersLive } from "./ResourceServers.ts"
import { TokensLive } from "./Tokens.ts"

export const OAuthLive = Layer.mergeAll(FlowLive, TokensLive).pipe(
  Layer.provideMerge(ClientsLive),
  Layer.provideMerge(CimdLive),
  Layer.provideMerge(ResourceServersLive)
)
