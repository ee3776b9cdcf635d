/** SHA-256 of a text's UTF-8 bytes as lowercase hex: how secrets (keys, tokens, session ids) are stored and looked up. */
import { createHash } from "node:crypto"

export const sha256Hex = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex")
