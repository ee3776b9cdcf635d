// A verifier worker that says it is ready and then never answers.
declare const self: Worker
self.onmessage = () => {}
self.postMessage({ ready: true })
export {}
