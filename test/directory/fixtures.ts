/**
 * The request sequences identity providers send, as data (reference-part-two §4.2): Okta's
 * documented SCIM 2.0 provisioning flow and Microsoft Entra ID's (with the bugs and habits its
 * provisioning service is known for, and the checks of its SCIM validator). Each step is sent with
 * `Content-Type: application/scim+json; charset=utf-8`; `{name}` in a path or body is a value saved
 * by an earlier step; `expect` maps a dotted path of the response body to the value it must have.
 */
import { entraProfileUpdates } from "./fixtures-profile.ts"

export interface Step {
  readonly name: string
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE"
  readonly path: string
  readonly body?: unknown
  readonly status: number
  /** name → dotted path in the response body */
  readonly save?: Record<string, string>
  readonly expect?: Record<string, unknown>
  /** dotted paths that must be absent */
  readonly absent?: ReadonlyArray<string>
}

const USER = "urn:ietf:params:scim:schemas:core:2.0:User"
const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
const ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp"

const oktaUser = (familyName: string, active = true) => ({
  schemas: [USER],
  userName: "dade.murphy@example.com",
  name: { givenName: "Dade", familyName },
  emails: [{ primary: true, value: "dade.murphy@example.com", type: "work" }],
  displayName: `Dade ${familyName}`,
  locale: "en-US",
  externalId: "00ujl29u0le5T6Aj10h7",
  groups: [],
  password: "1mz050nq",
  active
})

export const oktaSequence: ReadonlyArray<Step> = [
  { name: "test connection: users", method: "GET", path: "/Users?startIndex=1&count=2", status: 200, expect: { totalResults: 0, itemsPerPage: 0 } },
  { name: "test connection: groups", method: "GET", path: "/Groups?startIndex=1&count=100", status: 200, expect: { totalResults: 0 } },
  {
    name: "search before create",
    method: "GET",
    path: `/Users?filter=${encodeURIComponent('userName eq "dade.murphy@example.com"')}&startIndex=1&count=100`,
    status: 200,
    expect: { totalResults: 0, "Resources.length": 0 }
  },
  {
    name: "create",
    method: "POST",
    path: "/Users",
    body: oktaUser("Murphy"),
    status: 201,
    save: { userId: "id" },
    expect: { userName: "dade.murphy@example.com", active: true, "name.familyName": "Murphy", externalId: "00ujl29u0le5T6Aj10h7" },
    absent: ["password", "locale"]
  },
  {
    name: "search finds it (another case)",
    method: "GET",
    path: `/Users?filter=${encodeURIComponent('userName eq "Dade.Murphy@EXAMPLE.com"')}&startIndex=1&count=100`,
    status: 200,
    expect: { totalResults: 1, "Resources.0.id": "{userId}" }
  },
  { name: "get", method: "GET", path: "/Users/{userId}", status: 200, expect: { id: "{userId}", "meta.resourceType": "User" } },
  {
    name: "profile push by PUT",
    method: "PUT",
    path: "/Users/{userId}",
    body: { ...oktaUser("Murphy-Okta"), id: "{userId}" },
    status: 200,
    expect: { "name.familyName": "Murphy-Okta", displayName: "Dade Murphy-Okta", "meta.version": 'W/"2"' }
  },
  {
    name: "the same profile pushed again changes nothing",
    method: "PUT",
    path: "/Users/{userId}",
    body: { ...oktaUser("Murphy-Okta"), id: "{userId}" },
    status: 200,
    expect: { "meta.version": 'W/"2"' }
  },
  {
    name: "deactivate (no path)",
    method: "PATCH",
    path: "/Users/{userId}",
    body: { schemas: [PATCH], Operations: [{ op: "replace", value: { active: false } }] },
    status: 200,
    expect: { active: false, "meta.version": 'W/"3"' }
  },
  {
    name: "reactivate (no path)",
    method: "PATCH",
    path: "/Users/{userId}",
    body: { schemas: [PATCH], Operations: [{ op: "replace", value: { active: true } }] },
    status: 200,
    expect: { active: true }
  },
  {
    name: "create group",
    method: "POST",
    path: "/Groups",
    body: { schemas: [GROUP], displayName: "Test SCIMv2", members: [] },
    status: 201,
    save: { groupId: "id" },
    expect: { displayName: "Test SCIMv2", "members.length": 0 }
  },
  {
    name: "rename group (Okta echoes the id)",
    method: "PATCH",
    path: "/Groups/{groupId}",
    body: { schemas: [PATCH], Operations: [{ op: "replace", value: { id: "{groupId}", displayName: "Test SCIMv2 renamed" } }] },
    status: 200,
    expect: { displayName: "Test SCIMv2 renamed" }
  },
  {
    name: "add member",
    method: "PATCH",
    path: "/Groups/{groupId}",
    body: { schemas: [PATCH], Operations: [{ op: "add", path: "members", value: [{ value: "{userId}", display: "dade.murphy@example.com" }] }] },
    status: 200,
    expect: { "members.length": 1, "members.0.value": "{userId}" }
  },
  { name: "the member has a new version", method: "GET", path: "/Users/{userId}", status: 200, expect: { "meta.version": 'W/"5"' } },
  {
    name: "group search by name",
    method: "GET",
    path: `/Groups?filter=${encodeURIComponent('displayName eq "test scimv2 RENAMED"')}&startIndex=1&count=100`,
    status: 200,
    expect: { totalResults: 1, "Resources.0.id": "{groupId}" }
  },
  {
    name: "remove member",
    method: "PATCH",
    path: "/Groups/{groupId}",
    body: { schemas: [PATCH], Operations: [{ op: "remove", path: 'members[value eq "{userId}"]' }] },
    status: 200,
    expect: { "members.length": 0 }
  },
  { name: "and again once removed", method: "GET", path: "/Users/{userId}", status: 200, expect: { "meta.version": 'W/"6"' } }
]

export const entraSequence: ReadonlyArray<Step> = [
  {
    name: "probe a user that does not exist",
    method: "GET",
    path: `/Users?filter=${encodeURIComponent('userName eq "non-existent user"')}`,
    status: 200,
    expect: { totalResults: 0 }
  },
  {
    name: "create the manager",
    method: "POST",
    path: "/Users",
    body: { schemas: [USER, ENTERPRISE], externalId: "mgr-0001", userName: "Manager_1@contoso.com", active: true },
    status: 201,
    save: { managerId: "id" }
  },
  {
    name: "create (Entra's body: roles, meta, enterprise extension)",
    method: "POST",
    path: "/Users",
    body: {
      schemas: [USER, ENTERPRISE],
      externalId: "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
      userName: "Test_User_ab6490ee-1e48-479e-a20b-2d77186b5dd1@contoso.com",
      active: true,
      emails: [{ primary: true, type: "work", value: "Test_User_fd0ea19b@testuser.com" }],
      meta: { resourceType: "User" },
      name: { formatted: "givenName familyName", familyName: "familyName", givenName: "givenName" },
      roles: [],
      [ENTERPRISE]: { employeeNumber: "E-1", department: "Sales" }
    },
    status: 201,
    save: { userId: "id" },
    expect: { [`${ENTERPRISE}.department`]: "Sales" }
  },
  {
    name: "externalId eq",
    method: "GET",
    path: `/Users?filter=${encodeURIComponent('externalId eq "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef"')}`,
    status: 200,
    expect: { totalResults: 1, "Resources.0.id": "{userId}" }
  },
  {
    name: "externalId compares exactly",
    method: "GET",
    path: `/Users?filter=${encodeURIComponent('externalId eq "0A21F0F2-8D2A-4F8E-BF98-7363C4AED4EF"')}`,
    status: 200,
    expect: { totalResults: 0 }
  },
  {
    name: "capitalised ops on filtered and dotted paths",
    method: "PATCH",
    path: "/Users/{userId}",
    body: {
      schemas: [PATCH],
      Operations: [
        { op: "Replace", path: 'emails[type eq "work"].value', value: "updatedEmail@contoso.com" },
        { op: "Replace", path: "name.familyName", value: "updatedFamilyName" },
        { op: "Add", path: "displayName", value: "Updated Display" }
      ]
    },
    status: 200,
    expect: { "emails.0.value": "updatedEmail@contoso.com", "name.familyName": "updatedFamilyName", displayName: "Updated Display" }
  },
  {
    name: "Add on a filtered element that does not exist creates it",
    method: "PATCH",
    path: "/Users/{userId}",
    body: { schemas: [PATCH], Operations: [{ op: "Add", path: 'phoneNumbers[type eq "mobile"].value', value: "+1 555 0100" }] },
    status: 200,
    expect: { "phoneNumbers.0.type": "mobile", "phoneNumbers.0.value": "+1 555 0100" }
  },
  ...entraProfileUpdates,
  {
    name: "manager by the enterprise extension path (a bare id)",
    method: "PATCH",
    path: "/Users/{userId}",
    body: { schemas: [PATCH], Operations: [{ op: "Add", path: `${ENTERPRISE}:manager`, value: "{managerId}" }] },
    status: 200,
    expect: { [`${ENTERPRISE}.manager.value`]: "{managerId}", [`${ENTERPRISE}.department`]: "Marketing", "meta.version": 'W/"12"' }
  },
  {
    name: "filter on the manager",
    method: "GET",
    path: `/Users?filter=${encodeURIComponent(`${ENTERPRISE}:manager.value eq "{managerId}"`)}`,
    status: 200,
    expect: { totalResults: 1, "Resources.0.id": "{userId}" }
  },
  {
    name: "remove the manager",
    method: "PATCH",
    path: "/Users/{userId}",
    body: { schemas: [PATCH], Operations: [{ op: "Remove", path: `${ENTERPRISE}:manager` }] },
    status: 200,
    expect: { [`${ENTERPRISE}.department`]: "Marketing", "meta.version": 'W/"13"' },
    absent: [`${ENTERPRISE}.manager`]
  },
  {
    name: "disable with the string \"False\"",
    method: "PATCH",
    path: "/Users/{userId}",
    body: { schemas: [PATCH], Operations: [{ op: "Replace", path: "active", value: "False" }] },
    status: 200,
    expect: { active: false, "meta.version": 'W/"14"' }
  },
  { name: "a disabled user is still returned by GET", method: "GET", path: "/Users/{userId}", status: 200, expect: { active: false } },
  {
    name: "and by filter",
    method: "GET",
    path: `/Users?filter=${encodeURIComponent('userName eq "test_user_ab6490ee-1e48-479e-a20b-2d77186b5dd1@contoso.com"')}`,
    status: 200,
    expect: { totalResults: 1, "Resources.0.active": false }
  },
  {
    name: "enable with \"True\" in a no-path value",
    method: "PATCH",
    path: "/Users/{userId}",
    body: { schemas: [PATCH], Operations: [{ op: "Replace", value: { active: "True" } }] },
    status: 200,
    expect: { active: true, "meta.version": 'W/"15"' }
  },
  {
    name: "create group",
    method: "POST",
    path: "/Groups",
    body: { schemas: [GROUP], externalId: "8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159", displayName: "displayName", meta: { resourceType: "Group" } },
    status: 201,
    save: { groupId: "id" }
  },
  {
    name: "group by displayName, members excluded",
    method: "GET",
    path: `/Groups?excludedAttributes=members&filter=${encodeURIComponent('displayName eq "displayName"')}`,
    status: 200,
    expect: { totalResults: 1, "Resources.0.id": "{groupId}" },
    absent: ["Resources.0.members"]
  },
  {
    name: "get group, members excluded",
    method: "GET",
    path: "/Groups/{groupId}?excludedAttributes=members",
    status: 200,
    expect: { displayName: "displayName" },
    absent: ["members"]
  },
  {
    name: "Add members",
    method: "PATCH",
    path: "/Groups/{groupId}",
    body: { schemas: [PATCH], Operations: [{ op: "Add", path: "members", value: [{ $ref: null, value: "{userId}" }, { value: "{managerId}" }] }] },
    status: 200,
    expect: { "members.length": 2 }
  },
  { name: "a new member has a new version", method: "GET", path: "/Users/{userId}", status: 200, expect: { "meta.version": 'W/"16"' } },
  {
    name: "group with that member",
    method: "GET",
    path: `/Groups?filter=${encodeURIComponent('id eq "{groupId}" and members[value eq "{userId}"]')}&excludedAttributes=members`,
    status: 200,
    expect: { totalResults: 1 }
  },
  {
    name: "Remove a member by filter",
    method: "PATCH",
    path: "/Groups/{groupId}",
    body: { schemas: [PATCH], Operations: [{ op: "Remove", path: 'members[value eq "{userId}"]' }] },
    status: 200,
    expect: { "members.length": 1, "members.0.value": "{managerId}" }
  },
  { name: "so has a removed one", method: "GET", path: "/Users/{userId}", status: 200, expect: { "meta.version": 'W/"17"' } },
  {
    name: "Replace displayName",
    method: "PATCH",
    path: "/Groups/{groupId}",
    body: { schemas: [PATCH], Operations: [{ op: "Replace", path: "displayName", value: "1879db59updatedDisplayName" }] },
    status: 200,
    expect: { displayName: "1879db59updatedDisplayName" }
  },
  { name: "delete user", method: "DELETE", path: "/Users/{userId}", status: 204 },
  { name: "deleted user is gone", method: "GET", path: "/Users/{userId}", status: 404 },
  { name: "delete group", method: "DELETE", path: "/Groups/{groupId}", status: 204 },
  { name: "deleted group is gone", method: "GET", path: "/Groups/{groupId}", status: 404 }
]
