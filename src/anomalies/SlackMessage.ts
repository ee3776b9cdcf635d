/**
 * The body a Slack incoming webhook takes (`{ text, blocks }`) for an `anomaly.detected` event: the
 * rule, severity, agent and occurrences, and a link to the alert. `text` is the notification and
 * fallback; `blocks` the laid-out message. Slack reads `&`, `<` and `>` as markup, so values are escaped.
 */
const escape = (value: string) => value.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

const field = (data: Record<string, unknown>, name: string): string => {
  const value = data[name]
  return typeof value === "string" || typeof value === "number" ? escape(String(value)) : "none"
}

/** the alert's address in the API (PUBLIC_BASE_URL/v1/anomaly/alerts/<id>) */
export const alertLink = (publicBaseUrl: string, alertId: string) =>
  `${publicBaseUrl.replace(/\/+$/, "")}/v1/anomaly/alerts/${encodeURIComponent(alertId)}`

export const slackMessage = (data: Record<string, unknown>, publicBaseUrl: string) => {
  const alertId = typeof data.alertId === "string" ? data.alertId : ""
  const link = alertLink(publicBaseUrl, alertId)
  const rule = field(data, "ruleId")
  const severity = field(data, "severity")
  const agent = field(data, "agentId")
  const occurrences = field(data, "occurrences")
  const text = `Anomaly alert ${escape(alertId)}: rule ${rule}, severity ${severity}, agent ${agent}, ${occurrences} occurrence(s). <${link}|View the alert>`
  return {
    text,
    blocks: [
      { type: "header", text: { type: "plain_text", text: `Anomaly alert: ${String(data.ruleId ?? "")} (${String(data.severity ?? "")})`.slice(0, 150) } },
      {
        type: "section",
        fields: [
          { type: "mrkdwn", text: `*Rule*\n${rule}` },
          { type: "mrkdwn", text: `*Severity*\n${severity}` },
          { type: "mrkdwn", text: `*Agent*\n${agent}` },
          { type: "mrkdwn", text: `*Occurrences*\n${occurrences}` }
        ]
      },
      { type: "section", text: { type: "mrkdwn", text: `<${link}|View alert ${escape(alertId)}>` } }
    ]
  }
}
