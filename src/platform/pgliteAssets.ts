/**
 * PGlite's WebAssembly and data files. Under `bun build --compile` they are embedded in the
 * binary (imported as files) and handed to PGlite, which otherwise looks for them next to its own
 * module on disk.
 */
// @ts-ignore: Bun file import
import pgliteWasmPath from "../../node_modules/@electric-sql/pglite/dist/pglite.wasm" with { type: "file" }
// @ts-ignore: Bun file import
import initdbWasmPath from "../../node_modules/@electric-sql/pglite/dist/initdb.wasm" with { type: "file" }
// @ts-ignore: Bun file import
import dataPath from "../../node_modules/@electric-sql/pglite/dist/pglite.data" with { type: "file" }

export const loadPgliteAssets = async () => {
  const [pglite, initdb, data] = await Promise.all([
    Bun.file(pgliteWasmPath).arrayBuffer(),
    Bun.file(initdbWasmPath).arrayBuffer(),
    Bun.file(dataPath).arrayBuffer()
  ])
  return {
    pgliteWasmModule: await WebAssembly.compile(pglite),
    initdbWasmModule: await WebAssembly.compile(initdb),
    fsBundle: new Blob([data])
  }
}
