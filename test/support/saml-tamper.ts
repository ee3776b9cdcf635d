/**
 * Rewrites of a signed SAML Response for the negative tests (decisions §12): an attacker who holds
 * one validly signed Response changes what it says (the NameID, the Destination), strips its
 * signatures, or wraps it (XML signature wrapping: an unsigned evil assertion where the service
 * would read it, the signed original hidden elsewhere so the signature still verifies).
 */
import { DOMParser, XMLSerializer } from "@xmldom/xmldom"
import { randomUUID } from "node:crypto"

const NS = {
  protocol: "urn:oasis:names:tc:SAML:2.0:protocol",
  assertion: "urn:oasis:names:tc:SAML:2.0:assertion",
  dsig: "http://www.w3.org/2000/09/xmldsig#"
}

const parse = (xml: string) => new DOMParser().parseFromString(xml, "text/xml")
const serialize = (doc: Document) => new XMLSerializer().serializeToString(doc)
const child = (parent: Element, ns: string, local: string) =>
  Array.from(parent.childNodes).find((n): n is Element => n.nodeType === 1 && (n as Element).namespaceURI === ns && (n as Element).localName === local)
const assertionOf = (doc: Document) => child(doc.documentElement, NS.assertion, "Assertion")!

/** The signed assertion, copied with another NameID and ID and without its signature. */
const evilCopy = (doc: Document, nameId: string): Element => {
  const evil = assertionOf(doc).cloneNode(true) as Element
  evil.setAttribute("ID", `_evil${randomUUID()}`)
  const signature = child(evil, NS.dsig, "Signature")
  if (signature !== undefined) evil.removeChild(signature)
  const subject = child(evil, NS.assertion, "Subject")!
  child(subject, NS.assertion, "NameID")!.textContent = nameId
  return evil
}

/** Rewrites of a signed Response (decoded XML in, decoded XML out). */
export const tamper = {
  /** the signed assertion's NameID changed in place (the digest no longer matches) */
  nameId: (xml: string, nameId: string) => {
    const doc = parse(xml)
    child(child(assertionOf(doc), NS.assertion, "Subject")!, NS.assertion, "NameID")!.textContent = nameId
    return serialize(doc)
  },
  /** every Signature removed */
  stripSignatures: (xml: string) => {
    const doc = parse(xml)
    for (const s of Array.from(doc.getElementsByTagNameNS(NS.dsig, "Signature"))) s.parentNode!.removeChild(s)
    return serialize(doc)
  },
  /** XSW: an unsigned evil assertion takes the original's place; the signed original hides in Extensions */
  wrapInExtensions: (xml: string, nameId: string) => {
    const doc = parse(xml)
    const original = assertionOf(doc)
    const evil = evilCopy(doc, nameId)
    const extensions = doc.createElementNS(NS.protocol, "samlp:Extensions")
    doc.documentElement.replaceChild(evil, original)
    extensions.appendChild(original)
    doc.documentElement.insertBefore(extensions, child(doc.documentElement, NS.protocol, "Status")!)
    return serialize(doc)
  },
  /** XSW: the evil assertion carries the signed original inside it (the signature's parent is not the evil one) */
  nestOriginal: (xml: string, nameId: string) => {
    const doc = parse(xml)
    const original = assertionOf(doc)
    const evil = evilCopy(doc, nameId)
    doc.documentElement.replaceChild(evil, original)
    evil.appendChild(original)
    return serialize(doc)
  },
  /** XSW: the evil assertion beside the signed original (two assertions) */
  addSibling: (xml: string, nameId: string, before = true) => {
    const doc = parse(xml)
    const original = assertionOf(doc)
    const evil = evilCopy(doc, nameId)
    if (before) doc.documentElement.insertBefore(evil, original)
    else doc.documentElement.appendChild(evil)
    return serialize(doc)
  },
  /** XSW: the evil assertion takes the original's ID and signature; the original moves into Extensions */
  stealSignature: (xml: string, nameId: string) => {
    const doc = parse(xml)
    const original = assertionOf(doc)
    const evil = evilCopy(doc, nameId)
    evil.setAttribute("ID", original.getAttribute("ID")!)
    evil.insertBefore(child(original, NS.dsig, "Signature")!.cloneNode(true), child(evil, NS.assertion, "Subject")!)
    const extensions = doc.createElementNS(NS.protocol, "samlp:Extensions")
    doc.documentElement.replaceChild(evil, original)
    extensions.appendChild(original)
    doc.documentElement.insertBefore(extensions, child(doc.documentElement, NS.protocol, "Status")!)
    return serialize(doc)
  },
  /** the Response's Destination changed (outside the assertion's signature) */
  destination: (xml: string, destination: string) => {
    const doc = parse(xml)
    doc.documentElement.setAttribute("Destination", destination)
    return serialize(doc)
  },
  /** padding outside the signed assertion (an Extensions element) until the base64 form is `base64Chars` long */
  padTo: (xml: string, base64Chars: number) => {
    const doc = parse(xml)
    const extensions = doc.createElementNS(NS.protocol, "samlp:Extensions")
    doc.documentElement.insertBefore(extensions, child(doc.documentElement, NS.protocol, "Status")!)
    const bare = serialize(doc)
    const bytes = Math.floor(base64Chars / 4) * 3 - Buffer.byteLength(bare, "utf8")
    if (bytes < 0) throw new Error("the Response is already longer")
    return bare.replace("<samlp:Extensions/>", `<samlp:Extensions>${"x".repeat(bytes - "<samlp:Extensions></samlp:Extensions>".length + "<samlp:Extensions/>".length)}</samlp:Extensions>`)
  },
  /** a comment inside the signed NameID (c14n drops it, so the signature still verifies) */
  commentInNameId: (xml: string, at: number) => {
    const doc = parse(xml)
    const nameId = child(child(assertionOf(doc), NS.assertion, "Subject")!, NS.assertion, "NameID")!
    const text = nameId.textContent ?? ""
    while (nameId.firstChild) nameId.removeChild(nameId.firstChild)
    nameId.appendChild(doc.createTextNode(text.slice(0, at)))
    nameId.appendChild(doc.createComment(""))
    nameId.appendChild(doc.createTextNode(text.slice(at)))
    return serialize(doc)
  }
}
