/**
 * Readable meanings of scopes for the person on the consent page and the permissions page. Only
 * forms the service understands get one; any other scope is shown as itself (a guessed meaning
 * would tell the person something the application never said).
 */
const titleCase = (s: string) => s.replace(/[-_]/g, " ").replace(/\b\w/g, (c) => c.toUpperCase())

export const describeScope = (scope: string): string => {
  if (scope === "*") return "Full access to everything this agent is registered for"
  if (scope === "vault:credentials:exchange") return "Use the credentials you have stored for any connected service"
  const vault = /^vault:([^:]+):(\*|read)$/.exec(scope)
  if (vault) return `Use the ${titleCase(vault[1]!)} credentials you have stored`
  const parts = scope.split(":")
  if (parts.length < 2 || parts[0] === "") return scope
  const service = titleCase(parts[0]!)
  const action = parts.slice(1).join(":")
  switch (action) {
    case "*": return `Full access to your ${service} data`
    case "read": return `Read your ${service} data`
    case "write": return `Create and change your ${service} data`
    case "delete": return `Delete your ${service} data`
    case "credentials:read": return `Use your ${service} sign-in credentials`
    default: return scope
  }
}
