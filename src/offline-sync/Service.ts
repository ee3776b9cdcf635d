import { Layer } from "effect"

/** The capability's services, provided to its handlers and to other capabilities. */
export const OfflineSyncLive = Layer.empty
