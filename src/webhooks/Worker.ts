import { Layer } from "effect"

/** The capability's scheduled fiber (placeholder until it lands). */
export const WorkerLive = Layer.empty
