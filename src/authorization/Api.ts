/** Authorization requests, consent and tokens (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class AuthorizationApi extends HttpApiGroup.make("authorization") {}
