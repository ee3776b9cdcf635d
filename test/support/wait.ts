/**
 * Polling in real time, for what another fiber, process or instance does on its own schedule (never
 * for the service's own deadlines: those run on TestClock).
 */

/** polls every 10 ms until `check` holds, at most `tries` times; false if it never does */
export const waitFor = async (check: () => Promise<boolean>, tries = 300): Promise<boolean> => {
  for (let i = 0; i < tries; i++) {
    if (await check()) return true
    await Bun.sleep(10)
  }
  return false
}

/** the first moment (polled every 25 ms, at most `ms`) `check` holds, in ms; undefined if never */
export const within = async (ms: number, check: () => Promise<boolean>): Promise<number | undefined> => {
  const started = performance.now()
  while (performance.now() - started < ms) {
    if (await check()) return performance.now() - started
    await Bun.sleep(25)
  }
  return undefined
}
