/**
 * Provider names for the AAGUIDs of common passkey providers (decisions §17), so a person sees
 * "iCloud Keychain" rather than a UUID. A small local table: the community list cannot be fetched
 * at run time, and an unknown AAGUID simply has no name.
 */
const PROVIDERS: Record<string, string> = {
  "ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4": "Google Password Manager",
  "adce0002-35bc-c60a-648b-0b25f1f05503": "Chrome on Mac",
  "fbfc3007-154e-4ecc-8c0b-6e020557d7bd": "iCloud Keychain",
  "dd4ec289-e01d-41c9-bb89-70fa845d4bf2": "iCloud Keychain (Managed)",
  "08987058-cadc-4b81-b6e1-30de50dcbe96": "Windows Hello",
  "9ddd1817-af5a-4672-a2b9-3e3dd95000a9": "Windows Hello",
  "6028b017-b1d4-4c02-b4b3-afcdafc96bb2": "Windows Hello",
  "bada5566-a7aa-401f-bd96-45619a55120d": "1Password",
  "d548826e-79b4-db40-a3d8-11116f7e8349": "Bitwarden",
  "531126d6-e717-415c-9320-3d9aa6981239": "Dashlane",
  "fdb141b2-5d84-443e-8a35-4698c205a502": "KeePassXC",
  "50726f74-6f6e-5061-7373-50726f746f6e": "Proton Pass",
  "53414d53-554e-4700-0000-000000000000": "Samsung Pass",
  "b93fd961-f2e6-462f-b122-82002247de78": "Android Password Manager",
  "cb69481e-8ff7-4039-93ec-0a2729a154a8": "YubiKey 5 Series",
  "ee882879-721c-4913-9775-3dfcce97072a": "YubiKey 5 Series",
  "01020304-0506-0708-0102-030405060708": "Chromium virtual authenticator"
}

const ZERO = "00000000-0000-0000-0000-000000000000"

/** the provider's name, or null for the zero AAGUID (no attestation) and unknown ones */
export const providerName = (aaguid: string | null | undefined): string | null =>
  aaguid === null || aaguid === undefined || aaguid === ZERO ? null : PROVIDERS[aaguid.toLowerCase()] ?? null

/** an AAGUID as the 8-4-4-4-12 lower-case form stored and compared */
export const normaliseAaguid = (s: string): string | undefined =>
  /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(s) ? s.toLowerCase() : undefined
