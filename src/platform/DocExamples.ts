/**
 * Example values that the documentation of several capabilities shares (one consistent story: one
 * developer, one agent, one person). A value one capability alone uses lives in its Docs.ts.
 */
export const T = "2026-11-24T09:30:00.000Z"
export const LATER = "2026-11-25T09:30:00.000Z"
export const DEV = "dev_01JDQ8ZK3M4N5P6Q7R8S9T0VWX"
export const AGENT = "ag_01JDQ90A1B2C3D4E5F6G7H8J9K"
export const DID = `did:service:${AGENT}`
export const GRANT = "grnt_01JDQ92M3N4P5Q6R7S8T9V0WXY"
export const AREQ = "areq_01JDQ91B2C3D4E5F6G7H8J9KMN"
export const BUNDLE = "bundle_01JDQ95E6F7G8H9J0K1M2N3P4Q"
export const DELIVERY = "whd_01JDQ99J0K1M2N3P"
export const EVENT = "evt_01JDQ99J0K1M2N3P4Q5R6S7T8V"
export const PRINCIPAL = "user_42"
export const JWT = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6Ik5qVTRNVEEifQ.eyJzdWIiOiJ1c2VyXzQyIn0.c2lnbmF0dXJl"
/** the service's PUBLIC_BASE_URL in the examples */
export const BASE = "http://localhost:3001"
export const PASSKEY = "pkc_01JDQ9BM2N3P4Q5R6S7T8V9W0X"
