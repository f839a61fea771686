//go:build js && wasm

// Command wasm is the simulator in a browser: built with GOOS=js
// GOARCH=wasm (go generate ./web), it sets one JavaScript function,
// poolsimCall(op, requestJSON) → answerJSON, which is web/api.Call, and
// then calls poolsimReady() when the page defined it. It runs in a Web
// Worker (web/static/worker.js), so a long run never blocks the page.
package main

import (
	"context"
	"syscall/js"

	"github.com/poolsim/poolsim/web/api"
)

func main() {
	call := js.FuncOf(func(this js.Value, args []js.Value) any {
		if len(args) != 2 || args[0].Type() != js.TypeString || args[1].Type() != js.TypeString {
			return `{"error":"poolsimCall: want (op, requestJSON), two strings"}`
		}
		return string(api.Call(context.Background(), args[0].String(), []byte(args[1].String())))
	})
	js.Global().Set("poolsimCall", call)
	if ready := js.Global().Get("poolsimReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {} // keep serving calls
}
