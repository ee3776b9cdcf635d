/**
 * The half of idempotent retries (Idempotency.ts) that lives in the database client: in a request
 * that carries an Idempotency-Key, each outermost transaction marks the key committed as its last
 * statement, so the mark commits, or rolls back, with the operation's own changes.
 */
import { SqlClient } from "@effect/sql"
import { Effect, FiberRef, Option } from "effect"

export interface Keyed {
  readonly developerId: string
  readonly key: string
}

/** the key of the request this fiber serves, when it has one */
export const CurrentIdempotency = FiberRef.unsafeMake<Keyed | undefined>(undefined)

/**
 * The database client with one change: in a keyed request, each outermost transaction marks the key
 * committed as its last statement, so the mark commits (or rolls back) with the operation.
 */
export const markingTransactions = (sql: SqlClient.SqlClient): SqlClient.SqlClient =>
  new Proxy(sql, {
    get: (target, property, receiver) => {
      if (property !== "withTransaction") return Reflect.get(target, property, receiver)
      return <A, E, R>(effect: Effect.Effect<A, E, R>) =>
        Effect.flatMap(FiberRef.get(CurrentIdempotency), (keyed) =>
          keyed === undefined
            ? target.withTransaction(effect)
            : Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (outer) =>
              Option.isSome(outer)
                ? target.withTransaction(effect)
                : target.withTransaction(Effect.tap(effect, () =>
                  target`UPDATE idempotency_keys SET committed = true WHERE developer_id = ${keyed.developerId} AND key = ${keyed.key}`.pipe(Effect.orDie)))))
    }
  })
