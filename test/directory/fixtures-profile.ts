/**
 * Entra ID keeps a user current by PATCH alone and never resends a value it has sent: a PATCH of
 * every kind of attribute it changes (simple, a complex sub-attribute, a no-path value object, a
 * multi-valued element picked by filter, the enterprise extension, active), each answered with the
 * version it stores, and a repeat that changes nothing. Spliced into fixtures.ts's Entra sequence,
 * after the user has reached version 3; `{name}` as there.
 */
import type { Step } from "./fixtures.ts"

const ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"

const op = (...Operations: Array<Record<string, unknown>>) => ({ schemas: [PATCH], Operations })

/** the request the issue quotes: only a work email and a family name */
const emailAndFamilyName = op(
  { op: "Replace", path: 'emails[type eq "work"].value', value: "x@y" },
  { op: "Replace", path: "name.familyName", value: "F" }
)

export const entraProfileUpdates: ReadonlyArray<Step> = [
  {
    name: "profile update: only a work email and a family name (complex sub-attribute, multi-valued by filter)",
    method: "PATCH",
    path: "/Users/{userId}",
    body: emailAndFamilyName,
    status: 200,
    expect: { "emails.0.value": "x@y", "emails.0.type": "work", "name.familyName": "F", "name.givenName": "givenName", "meta.version": 'W/"4"' }
  },
  {
    name: "the same update again changes nothing (same version, no event)",
    method: "PATCH",
    path: "/Users/{userId}",
    body: emailAndFamilyName,
    status: 200,
    expect: { "emails.0.value": "x@y", "meta.version": 'W/"4"' }
  },
  {
    name: "given name alone",
    method: "PATCH",
    path: "/Users/{userId}",
    body: op({ op: "Replace", path: "name.givenName", value: "Given2" }),
    status: 200,
    expect: { "name.givenName": "Given2", "name.familyName": "F", "meta.version": 'W/"5"' }
  },
  {
    name: "a no-path value object naming one part of name keeps the others",
    method: "PATCH",
    path: "/Users/{userId}",
    body: op({ op: "Replace", value: { name: { formatted: "Given2 F" } } }),
    status: 200,
    expect: { "name.formatted": "Given2 F", "name.givenName": "Given2", "name.familyName": "F", "meta.version": 'W/"6"' }
  },
  {
    name: "simple attribute",
    method: "PATCH",
    path: "/Users/{userId}",
    body: op({ op: "Replace", path: "displayName", value: "Given2 F" }),
    status: 200,
    expect: { displayName: "Given2 F", "meta.version": 'W/"7"' }
  },
  {
    name: "mobile phone by filter",
    method: "PATCH",
    path: "/Users/{userId}",
    body: op({ op: "Replace", path: 'phoneNumbers[type eq "mobile"].value', value: "+1 555 0199" }),
    status: 200,
    expect: { "phoneNumbers.0.value": "+1 555 0199", "phoneNumbers.length": 1, "meta.version": 'W/"8"' }
  },
  {
    name: "enterprise extension attributes by their URN paths",
    method: "PATCH",
    path: "/Users/{userId}",
    body: op(
      { op: "Replace", path: `${ENTERPRISE}:department`, value: "Marketing" },
      { op: "Add", path: `${ENTERPRISE}:employeeNumber`, value: "E-2" }
    ),
    status: 200,
    expect: { [`${ENTERPRISE}.department`]: "Marketing", [`${ENTERPRISE}.employeeNumber`]: "E-2", "meta.version": 'W/"9"' }
  },
  {
    name: "a work phone added by filter next to the mobile one",
    method: "PATCH",
    path: "/Users/{userId}",
    body: op({ op: "Add", path: 'phoneNumbers[type eq "work"].value', value: "+1 555 0200" }),
    status: 200,
    expect: { "phoneNumbers.length": 2, "phoneNumbers.1.type": "work", "meta.version": 'W/"10"' }
  },
  {
    name: "the mobile phone removed by filter",
    method: "PATCH",
    path: "/Users/{userId}",
    body: op({ op: "Remove", path: 'phoneNumbers[type eq "mobile"]' }),
    status: 200,
    expect: { "phoneNumbers.length": 1, "phoneNumbers.0.value": "+1 555 0200", "meta.version": 'W/"11"' }
  }
]
