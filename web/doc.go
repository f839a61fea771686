// Package web is poolsim's page in a browser: the lessons (static/), the
// simulator compiled to WebAssembly (static/poolsim.wasm.gz, built from
// web/wasm by `go generate ./web`), all embedded in the poolsim binary.
// Handler serves them (poolsim serve) and Export writes them as a static
// folder any web server can host. Nothing is fetched from the network at
// run time: the page's scripts, styles and charts are in static/.
//
// The page runs the same Go packages the command line runs (web/api), so a
// scenario and seed give it the bytes `poolsim run --format json` prints.
package web

//go:generate go run gen.go
