import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const ConsentBundlesHttp = HttpApiBuilder.group(Api, "consentBundles", (handlers) => handlers)
