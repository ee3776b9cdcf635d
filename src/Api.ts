/** The whole HTTP interface in one place: every group, each declared in its capability folder. */
import { HttpApi, OpenApi } from "@effect/platform"
import { AgentsApi } from "./agents/Api.ts"
import { AnomaliesApi } from "./anomalies/Api.ts"
import { AnomalyChannelsApi } from "./anomalies/ChannelsApi.ts"
import { AuditApi } from "./audit/Api.ts"
import { AuthorizationApi } from "./authorization/Api.ts"
import { BillingApi, BillingProviderApi } from "./billing/Api.ts"
import { BreachesApi } from "./breaches/Api.ts"
import { BudgetsApi } from "./budgets/Api.ts"
import { ComplianceApi } from "./compliance/Api.ts"
import { ConsentBundlesApi } from "./consent-bundles/Api.ts"
import { CredentialsApi } from "./credentials/Api.ts"
import { DevelopersApi } from "./developers/Api.ts"
import { ScimApi, ScimTokensApi } from "./directory/Api.ts"
import { DomainsApi } from "./domains/Api.ts"
import { EventsApi } from "./events/Api.ts"
import { ConsoleApi } from "./console/Api.ts"
import { DpdpGrievancesApi, DpdpNoticesApi, DpdpRecordsApi } from "./dpdp/Api.ts"
import { GrantsApi } from "./grants/Api.ts"
import { OAuthApi, ResourceServersApi } from "./oauth/Api.ts"
import { OAuthSignInApi } from "./oauth/SignInApi.ts"
import { OfflineSyncApi } from "./offline-sync/Api.ts"
import { PasskeysApi } from "./passkeys/Api.ts"
import { describeApi } from "./openapi/Document.ts"
import { documentErrors } from "./platform/OpenApiErrors.ts"
import { PermissionsPageApi, PrincipalApi, PrincipalSessionsApi } from "./principals/Api.ts"
import { PoliciesApi } from "./policies/Api.ts"
import { SsoConnectionsApi, SsoLoginApi } from "./sso/Api.ts"
import { SamlApi } from "./sso/saml/Api.ts"
import { SystemApi } from "./system/Api.ts"
import { VaultApi } from "./vault/Api.ts"
import { WebhooksApi } from "./webhooks/Api.ts"

const Endpoints = HttpApi.make("agent-auth-service")
  .add(SystemApi)
  .add(DevelopersApi)
  .add(AgentsApi)
  .add(AuthorizationApi)
  .add(GrantsApi)
  .add(AuditApi)
  .add(ConsentBundlesApi)
  .add(OfflineSyncApi)
  .add(VaultApi)
  .add(BreachesApi)
  .add(DpdpNoticesApi)
  .add(DpdpRecordsApi)
  .add(DpdpGrievancesApi)
  .add(BudgetsApi)
  .add(DomainsApi)
  .add(PasskeysApi)
  .add(WebhooksApi)
  .add(ScimTokensApi)
  .add(ScimApi)
  .add(ComplianceApi)
  .add(CredentialsApi)
  .add(PrincipalSessionsApi)
  .add(PrincipalApi)
  .add(PermissionsPageApi)
  .add(PoliciesApi)
  .add(BillingApi)
  .add(BillingProviderApi)
  .add(SsoConnectionsApi)
  .add(SsoLoginApi)
  .add(SamlApi)
  .add(AnomaliesApi)
  .add(AnomalyChannelsApi)
  .add(EventsApi)
  .add(ConsoleApi)
  .add(ResourceServersApi)
  .add(OAuthApi)
  .add(OAuthSignInApi)
  .annotate(OpenApi.Title, "agent-auth-service")
  .annotate(OpenApi.Version, "1.0.0")
  .annotate(OpenApi.Description, "Authorization service for software agents acting on behalf of people")

// the transform reads each operation's documentation from the groups (their OperationDocs annotation)
export class Api extends Endpoints.annotate(OpenApi.Transform, (spec) => describeApi(Endpoints, documentErrors(spec))) {}
