// worker.js runs the simulator (poolsim.wasm, Go compiled to WebAssembly)
// off the page's thread. Its first message carries the compiled
// WebAssembly.Module; every later one is {id, op, req}, answered with
// {id, answer, ms}: answer is poolsimCall(op, JSON) (web/api.Call).
// A run cannot be interrupted inside Go, so the page replaces a run by
// ending this worker and starting another from the same module.
"use strict";
importScripts("wasm_exec.js");

let ready = null;

onmessage = async (e) => {
	const m = e.data;
	if (m.module) {
		const go = new Go();
		ready = new Promise((resolve) => { self.poolsimReady = resolve; });
		const instance = await WebAssembly.instantiate(m.module, go.importObject);
		go.run(instance);
		await ready;
		postMessage({ ready: true });
		return;
	}
	await ready;
	const t0 = performance.now();
	const answer = self.poolsimCall(m.op, JSON.stringify(m.req));
	postMessage({ id: m.id, answer, ms: performance.now() - t0 });
};
