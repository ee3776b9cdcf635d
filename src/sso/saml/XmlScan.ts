/**
 * The linear pre-scan of XML from outside (SAML Responses at the ACS, IdP metadata) before any DOM
 * is built (decisions §19, revised). xmldom and node-saml's xml2js are fast on SAML's shapes but
 * not on deep or wide ones: 90,000 nested elements under 1 MiB held the event loop 15 s, and
 * 40,000 attributes on one element ~1.5 s (attributes are checked for duplicates pairwise).
 *
 * One pass over the text: comments, CDATA and processing instructions are skipped; any other `<!`
 * (DOCTYPE, ENTITY) is refused; each start tag is counted and its attributes counted as the `=`
 * outside quoted values. The limits:
 * - no DOCTYPE (nor any markup declaration);
 * - at most 32 levels of element nesting (the root is level 1);
 * - at most 5,000 elements in the whole document (so in any assertion too);
 * - at most 100 `Attribute` elements inside each `Assertion` (any prefix: the scan does not resolve
 *   namespaces, so it may count a foreign `x:Attribute` too, never fewer);
 * - at most 50 XML attributes on one element (namespace declarations included; SAML's elements
 *   carry a handful).
 * What is merely malformed (an unclosed tag) is left to the parser, which refuses it.
 */
export const XML_LIMITS = { depth: 32, elements: 5_000, samlAttributesPerAssertion: 100, attributesPerElement: 50 } as const

const LT = 60, GT = 62, SLASH = 47, EQ = 61, DQ = 34, SQ = 39

const nameEnds = (c: number) => c === GT || c === SLASH || c === 32 || c === 9 || c === 10 || c === 13

/** The refusal, worded to follow "The SAMLResponse …" / "The IdP metadata …", or undefined. */
export const scanXml = (xml: string): string | undefined => {
  const n = xml.length
  let depth = 0
  let elements = 0
  /** the depth at which the open Assertion began, or -1 */
  let assertionDepth = -1
  let samlAttributes = 0
  let i = 0
  for (;;) {
    const lt = xml.indexOf("<", i)
    if (lt < 0) return undefined
    const next = xml.charCodeAt(lt + 1)
    if (xml.startsWith("<!--", lt) || xml.startsWith("<![CDATA[", lt) || next === 63 /* ? */) {
      const close = xml.startsWith("<!--", lt) ? "-->" : next === 63 ? "?>" : "]]>"
      const end = xml.indexOf(close, lt + 2)
      if (end < 0) return undefined
      i = end + close.length
      continue
    }
    if (next === 33 /* ! */) return "must not contain a DOCTYPE"
    if (next === SLASH) {
      if (depth === assertionDepth) assertionDepth = -1
      if (depth > 0) depth--
      const end = xml.indexOf(">", lt)
      if (end < 0) return undefined
      i = end + 1
      continue
    }
    let j = lt + 1
    while (j < n && !nameEnds(xml.charCodeAt(j))) j++
    const name = xml.slice(lt + 1, j)
    let attributes = 0
    let quote = 0
    for (; j < n; j++) {
      const c = xml.charCodeAt(j)
      if (quote !== 0) {
        if (c === quote) quote = 0
      } else if (c === DQ || c === SQ) quote = c
      else if (c === EQ && ++attributes > XML_LIMITS.attributesPerElement) {
        return `has an element with more than ${XML_LIMITS.attributesPerElement} attributes`
      } else if (c === GT) break
    }
    if (j >= n) return undefined
    if (++elements > XML_LIMITS.elements) return `has more than ${XML_LIMITS.elements} elements`
    if (depth + 1 > XML_LIMITS.depth) return `nests elements deeper than ${XML_LIMITS.depth} levels`
    const selfClosing = xml.charCodeAt(j - 1) === SLASH
    const local = name.slice(name.indexOf(":") + 1)
    if (!selfClosing) depth++
    if (local === "Assertion" && assertionDepth < 0 && !selfClosing) {
      assertionDepth = depth
      samlAttributes = 0
    } else if (local === "Attribute" && assertionDepth >= 0 && ++samlAttributes > XML_LIMITS.samlAttributesPerAssertion) {
      return `has an assertion with more than ${XML_LIMITS.samlAttributesPerAssertion} attributes`
    }
    i = j + 1
  }
}
