/** The token endpoint's shapes, shared by its grant types (Tokens.ts, Exchange.ts). */

/** a urlencoded body, one value per parameter */
export type Form = Readonly<Record<string, string>>

export interface TokenAnswer {
  readonly access_token: string
  readonly token_type: "Bearer"
  readonly expires_in: number
  readonly scope: string
  readonly refresh_token?: string
}

/** what an OAuth grant was made for (decisions §22.5) */
export interface OAuthGrantFacts {
  readonly resourceServerId: string | null
  readonly resource: string | null
  readonly clientId: string | null
  readonly authTime: Date | null
}
