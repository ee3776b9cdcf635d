/** Passkeys (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class PasskeysApi extends HttpApiGroup.make("passkeys") {}
