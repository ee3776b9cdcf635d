/** Credential vault (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class VaultApi extends HttpApiGroup.make("vault") {}
