// call.js runs the page's wasm under Node through Go's own
// lib/wasm/wasm_exec_node.js and makes one API call:
//   node call.js WASM_EXEC_NODE_JS POOLSIM_WASM OP REQUEST_FILE
// It writes poolsimCall(OP, request)'s answer to stdout and exits.
"use strict";
const fs = require("fs");
const [, , execNode, wasm, op, reqFile] = process.argv;
const request = fs.readFileSync(reqFile, "utf8");
globalThis.poolsimReady = () => setTimeout(() => {
	const answer = globalThis.poolsimCall(op, request);
	fs.writeSync(1, answer);
	process.removeAllListeners("exit"); // wasm_exec_node.js's: it reports a Go still serving as deadlocked
	process.exit(0);
}, 0); // not inside main's call: Go serves calls once main blocks
process.argv = [process.argv[0], execNode, wasm];
require(execNode);
