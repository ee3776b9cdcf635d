/**
 * The Cedar engine as a value that can be thrown away (decisions §19, revised). cedar-wasm's glue
 * keeps its wasm instance in module-level variables and `initSync` refuses to run twice, so one
 * trap (a stack overflow inside the wasm shows as "Out of bounds memory access") would leave every
 * later call of the process failing. Instead of importing the glue, its text is embedded and turned
 * into a factory: each call of the factory is a fresh copy of the glue with its own instance of the
 * (compiled once) module. A copy that failed is dropped and collected; re-importing the glue under a
 * new URL would also work but every copy would stay in the module registry (~2.5 MB each, measured).
 *
 * The wasm and the glue are imported as files/text so `bun build --compile` embeds both.
 */
// @ts-ignore: Bun file import
import cedarWasmPath from "../../node_modules/@cedar-policy/cedar-wasm/web/cedar_wasm_bg.wasm" with { type: "file" }
// @ts-ignore: Bun text import
import glueText from "../../node_modules/@cedar-policy/cedar-wasm/web/cedar_wasm.js" with { type: "text" }
import type * as CedarApi from "@cedar-policy/cedar-wasm/web"

export type Cedar = typeof CedarApi

/** The glue's ES module text as a function body that returns its exports. */
const factoryBody = (text: string): string => {
  const names = [...text.matchAll(/^export function (\w+)/gm)].map((m) => m[1]!)
  if (!names.includes("policySetTextToParts") || !/^export \{ initSync,/m.test(text)) {
    throw new Error("cedar-wasm's glue has an unexpected shape; CedarEngine.ts needs a look")
  }
  return `"use strict";\n` + text
    .replace(/^export function /gm, "function ")
    .replace(/^export \{[^}]*\};?\s*$/m, "")
    // only the async loader (unused: instances are made with initSync) reads import.meta
    .replace(/import\.meta\.url/g, "undefined") +
    `\nreturn { initSync, ${names.join(", ")} };`
}

let compiled: WebAssembly.Module | undefined
let makeGlue: (() => Cedar & { initSync: (o: { module: WebAssembly.Module }) => unknown }) | undefined
let current: Cedar | undefined
let generation = 0
const listeners: Array<() => void> = []

let loading: Promise<void> | undefined
/**
 * Compiles the module once per process (~150 ms, more on a busy machine) and makes the first
 * instance; a worker thread is given the main thread's compiled module instead (CedarPool.ts).
 */
export const initCedar = (module?: WebAssembly.Module): Promise<void> =>
  // (`Effect.promise(initCedar)` passes an AbortSignal: only a module counts)
  loading ??= (module instanceof WebAssembly.Module ? Promise.resolve(module) : Bun.file(cedarWasmPath).arrayBuffer().then((bytes) => new WebAssembly.Module(bytes)))
    .then((module) => {
      compiled = module
      makeGlue = new Function(factoryBody(glueText as unknown as string)) as typeof makeGlue
      recreate()
    })

/** the compiled module (after initCedar): a worker is handed it rather than compiling its own */
export const compiledCedar = (): WebAssembly.Module | undefined => compiled

/** A fresh glue and instance; whatever the old instance held (pre-parsed sets) is gone. */
const recreate = () => {
  const glue = makeGlue!()
  glue.initSync({ module: compiled! })
  current = glue
  generation++
  for (const listener of listeners) listener()
}

/** The live engine (after initCedar). */
export const cedar = (): Cedar => {
  if (current === undefined) throw new Error("initCedar() has not run")
  return current
}

/** how many instances this process has made (1 after start; tests read it) */
export const engineGeneration = () => generation

/** called after a re-creation: state kept beside the old instance must be dropped */
export const onRecreate = (listener: () => void) => void listeners.push(listener)

/**
 * Runs `f` against the engine; anything it throws (a trap, a RuntimeError, a RangeError from the
 * glue) replaces the engine before the error goes on, so the next call, whoever makes it, gets a
 * sound one.
 */
export const withEngine = <A>(f: (engine: Cedar) => A): A => {
  const engine = cedar()
  try {
    return f(engine)
  } catch (e) {
    if (engine === current) recreate()
    throw e
  }
}
