package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/web"
)

func init() {
	register(command{name: "serve", short: "the lessons in a browser: serve the page, or --export it as a static folder", run: runServe})
}

const serveHelp = `Usage: poolsim serve [--listen ADDR] [--export DIR]

Serves poolsim's page: queueing lessons you can touch (Little's law,
Erlang C, open versus closed clients, the pool modes, CPU contention and
the USL peak) and "your scenario" (run, sweep and download any scenario).
The simulator runs in the browser, compiled to WebAssembly from the same
packages as this command, so a scenario and seed give the page the bytes
'poolsim run --format json' prints. The page is embedded in this binary and
fetches nothing from the network.

URL parameters reproduce a view:
  ?lesson=your-scenario&scenario=pgbouncer-modes&seed=7&set=workload.clients=100
  (lesson: little, erlang-c, closed, modes, usl, your-scenario; set may repeat)

--export DIR writes the page as a static folder any web server can host,
and exits: poolsim.wasm is there twice, as poolsim.wasm (for hosts that
serve files as they are) and poolsim.wasm.gz (for servers that send a
precompressed copy, e.g. nginx's gzip_static).

Examples:
  poolsim serve                            # http://127.0.0.1:8080/
  poolsim serve --listen :9000             # every interface, port 9000
  poolsim serve --export site/ && python3 -m http.server -d site

Exit status: 0 success (Ctrl-C stops the server), 1 failure, 2 usage error.
`

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve the page on (host:port; :0 picks a free port)")
	export := fs.String("export", "", "write the page into this folder as static files and exit")
	fs.Usage = func() { fmt.Fprint(stderr, serveHelp) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("serve takes no arguments, got %q; see 'poolsim serve --help'", fs.Arg(0))
	}
	if *export != "" {
		if fs.Changed("listen") {
			return usagef("--export writes files and serves nothing: drop --listen")
		}
		files, err := web.Export(*export)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		fmt.Fprintf(stdout, "wrote %d files to %s; serve that folder with any web server\n", len(files), *export)
		return nil
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return usagef("serve: --listen %s: %v", *listen, err)
	}
	return serve(ctx, ln, stdout)
}

// serve serves the page on ln until ctx is done, then shuts down within
// five seconds.
func serve(ctx context.Context, ln net.Listener, stdout io.Writer) error {
	srv := &http.Server{
		Handler:           web.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	fmt.Fprintf(stdout, "poolsim serve: the lessons are at http://%s/ (Ctrl-C stops)\n", ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	return nil
}
