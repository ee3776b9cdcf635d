/**
 * The service's errors. Each is a Schema.TaggedError annotated with its HTTP status, carrying the
 * interface's `code` and a human `message`. The request id is added to every error body by the
 * HTTP envelope (platform/HttpEnvelope.ts), so handlers never thread it through.
 *
 * One class per status keeps the OpenAPI error union small while `code` stays exact per operation.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

const fields = {
  code: Schema.String,
  message: Schema.String,
  details: Schema.optional(Schema.Array(Schema.Struct({ path: Schema.String, message: Schema.String })))
}

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields, HttpApiSchema.annotations({ status: 400 })) {}
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields, HttpApiSchema.annotations({ status: 401 })) {}
export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", fields, HttpApiSchema.annotations({ status: 402 })) {}
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields, HttpApiSchema.annotations({ status: 403 })) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields, HttpApiSchema.annotations({ status: 404 })) {}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields, HttpApiSchema.annotations({ status: 409 })) {}
export class Gone extends Schema.TaggedError<Gone>()("Gone", fields, HttpApiSchema.annotations({ status: 410 })) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields, HttpApiSchema.annotations({ status: 413 })) {}
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", fields, HttpApiSchema.annotations({ status: 422 })) {}
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", fields, HttpApiSchema.annotations({ status: 429 })) {}
export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", fields, HttpApiSchema.annotations({ status: 502 })) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", fields, HttpApiSchema.annotations({ status: 503 })) {}

/** Shorthands: `fail.notFound("BUNDLE_NOT_FOUND", "Bundle not found")` */
export const err = {
  badRequest: (code: string, message: string, details?: ReadonlyArray<{ path: string; message: string }>) =>
    new BadRequest({ code, message, details }),
  unauthorized: (message = "Invalid or missing credentials", code = "UNAUTHORIZED") => new Unauthorized({ code, message }),
  paymentRequired: (code: string, message: string) => new PaymentRequired({ code, message }),
  forbidden: (code: string, message: string) => new Forbidden({ code, message }),
  notFound: (code: string, message: string) => new NotFound({ code, message }),
  conflict: (code: string, message: string) => new Conflict({ code, message }),
  gone: (code: string, message: string) => new Gone({ code, message }),
  payloadTooLarge: (code: string, message: string) => new PayloadTooLarge({ code, message }),
  unprocessable: (code: string, message: string) => new Unprocessable({ code, message }),
  badGateway: (code: string, message: string) => new BadGateway({ code, message }),
  unavailable: (code: string, message: string) => new Unavailable({ code, message })
}

export type ApiError =
  | BadRequest | Unauthorized | PaymentRequired | Forbidden | NotFound | Conflict | Gone
  | PayloadTooLarge | Unprocessable | TooManyRequests | BadGateway | Unavailable
