/** An operator command of the binary (`agent-auth <command> …`): it runs against the configured database and answers one text to print. */
import type { Effect } from "effect"
import type { AppConfig } from "../Config.ts"

export type OperatorCommand = (args: ReadonlyArray<string>, config: AppConfig) => Effect.Effect<string, Error, any>
