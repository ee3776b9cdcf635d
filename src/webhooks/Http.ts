import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const WebhooksHttp = HttpApiBuilder.group(Api, "webhooks", (handlers) => handlers)
