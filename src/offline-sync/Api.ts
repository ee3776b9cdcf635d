/** Offline audit sync (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class OfflineSyncApi extends HttpApiGroup.make("offlineSync") {}
