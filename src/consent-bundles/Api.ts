/** Consent bundles (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class ConsentBundlesApi extends HttpApiGroup.make("consentBundles") {}
