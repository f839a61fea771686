package pooler

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// The startup-parameter tests with the drivers users run: each script opens
// two connections through a one-server transaction-mode pool, one asking
// for schema dr1 and one for dr2 the driver's own way, and reads table t
// through each, alternating, four times; it prints what it read. .ci/run
// installs every driver; outside CI a missing one skips its test.

// driverSchemas is what every script must print: the schema of each
// connection, alternating.
const driverSchemas = "dr1 dr2 dr1 dr2 dr1 dr2 dr1 dr2"

// need finds a tool or skips (fails under CI=true).
func need(t *testing.T, path string, args ...string) string {
	t.Helper()
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("%s %v: %v: %s (.ci/run installs it)", path, args, err, out)
		}
		t.Skipf("%s %v: %v: %s", path, args, err, out)
	}
	return path
}

// debianPython is the Python the Debian driver packages install into.
func debianPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// runDriver starts a proxy (pool of one server, transaction mode) and runs
// a script that must print driverSchemas.
func runDriver(t *testing.T, name string, cmd func(ctx context.Context, host, port string) *exec.Cmd) {
	t.Helper()
	tp := startProxy(t, func(c *Config) { c.DefaultPoolSize = 1 })
	ctx := testCtx(t, 120*time.Second)
	makeSchemas(ctx, t, "dr")
	u, _ := url.Parse(tp.dsn)
	c := cmd(ctx, u.Hostname(), u.Port())
	out, err := c.CombinedOutput()
	if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != driverSchemas {
		t.Errorf("%s through the proxy: %v\n%s\nwant %q", name, err, out, driverSchemas)
	}
}

func TestDriverPsycopg(t *testing.T) {
	py := need(t, debianPython(), "-c", "import psycopg")
	runDriver(t, "psycopg 3 options=", func(ctx context.Context, host, port string) *exec.Cmd {
		return exec.CommandContext(ctx, py, "-c", `
import sys, psycopg
host, port = sys.argv[1], sys.argv[2]
conns = [psycopg.connect(host=host, port=port, dbname="poolsim", user="poolsim", password="poolsim",
                         options="-c search_path=" + s, autocommit=True) for s in ("dr1", "dr2")]
for _ in range(4):
    for c in conns:
        print(c.execute("select v from t").fetchone()[0])
`, host, port)
	})
}

func TestDriverPsycopg2(t *testing.T) {
	py := need(t, debianPython(), "-c", "import psycopg2")
	runDriver(t, "psycopg2 options=", func(ctx context.Context, host, port string) *exec.Cmd {
		return exec.CommandContext(ctx, py, "-c", `
import sys, psycopg2
host, port = sys.argv[1], sys.argv[2]
conns = [psycopg2.connect(host=host, port=port, dbname="poolsim", user="poolsim", password="poolsim",
                          options="-c search_path=" + s) for s in ("dr1", "dr2")]
for c in conns:
    c.autocommit = True
for _ in range(4):
    for c in conns:
        cur = c.cursor()
        cur.execute("select v from t")
        print(cur.fetchone()[0])
`, host, port)
	})
}

func TestDriverAsyncpg(t *testing.T) {
	py := need(t, debianPython(), "-c", "import asyncpg")
	runDriver(t, "asyncpg server_settings", func(ctx context.Context, host, port string) *exec.Cmd {
		// statement_cache_size=0: asyncpg prepares every query, which a
		// transaction pool without max_prepared_statements cannot keep.
		return exec.CommandContext(ctx, py, "-c", `
import sys, asyncio, asyncpg
async def main(host, port):
    conns = [await asyncpg.connect(host=host, port=int(port), database="poolsim", user="poolsim", password="poolsim",
                                   statement_cache_size=0, server_settings={"search_path": s}) for s in ("dr1", "dr2")]
    for _ in range(4):
        for c in conns:
            print(await c.fetchval("select v from t"))
asyncio.run(main(sys.argv[1], sys.argv[2]))
`, host, port)
	})
}

func TestDriverNodePostgres(t *testing.T) {
	node := need(t, "node", "--version")
	mod := nodePg(t)
	runDriver(t, "node-postgres options", func(ctx context.Context, host, port string) *exec.Cmd {
		c := exec.CommandContext(ctx, node, "-e", `
const { Client } = require("pg");
(async () => {
  const [host, port] = process.argv.slice(1);
  const conns = [];
  for (const s of ["dr1", "dr2"]) {
    const c = new Client({ host, port: +port, database: "poolsim", user: "poolsim", password: "poolsim", options: "-c search_path=" + s });
    await c.connect();
    conns.push(c);
  }
  for (let i = 0; i < 4; i++) for (const c of conns) console.log((await c.query("select v from t")).rows[0].v);
  for (const c of conns) await c.end();
})().catch((e) => { console.error(e); process.exit(1); });
`, host, port)
		c.Env = append(os.Environ(), "NODE_PATH="+mod)
		return c
	})
}

// nodePg returns a node_modules folder holding node-postgres: where
// .ci/run installed it (POOLSIM_NODE_MODULES), else installed with npm
// into the user's cache folder once.
func nodePg(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("POOLSIM_NODE_MODULES"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "pg")); err != nil && pgclustertest.InCI() {
			t.Fatalf("POOLSIM_NODE_MODULES=%s has no pg: %v", dir, err)
		}
		return dir
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skip(err)
	}
	prefix := filepath.Join(cache, "poolsim", "node-pg")
	mod := filepath.Join(prefix, "node_modules")
	if _, err := os.Stat(filepath.Join(mod, "pg", "package.json")); err == nil {
		return mod
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		if pgclustertest.InCI() {
			t.Fatal("npm not found (.ci/run installs node-postgres)")
		}
		t.Skip("npm not found")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--prefix", prefix, "pg@8.13.1").CombinedOutput()
	if err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("npm install pg: %v\n%s", err, out)
		}
		t.Skipf("npm install pg: %v\n%s", err, out)
	}
	return mod
}

func TestDriverJDBC(t *testing.T) {
	java := need(t, "java", "-version")
	jar := "/usr/share/java/postgresql.jar"
	if _, err := os.Stat(jar); err != nil {
		if pgclustertest.InCI() {
			t.Fatalf("pgjdbc: %v (.ci/run installs libpostgresql-jdbc-java)", err)
		}
		t.Skipf("pgjdbc: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "Schemas.java")
	err := os.WriteFile(src, []byte(`
import java.sql.*;
public class Schemas {
  public static void main(String[] a) throws Exception {
    Connection[] cs = new Connection[2];
    for (int i = 0; i < 2; i++) {
      // preferQueryMode=simple: no server-side prepared statements, which a
      // transaction pool without max_prepared_statements cannot keep.
      cs[i] = DriverManager.getConnection("jdbc:postgresql://" + a[0] + ":" + a[1] + "/poolsim?currentSchema=dr" + (i + 1)
          + "&preferQueryMode=simple", "poolsim", "poolsim");
    }
    for (int r = 0; r < 4; r++) for (Connection c : cs) {
      try (ResultSet rs = c.createStatement().executeQuery("select v from t")) { rs.next(); System.out.println(rs.getString(1)); }
    }
  }
}
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	runDriver(t, "pgjdbc currentSchema", func(ctx context.Context, host, port string) *exec.Cmd {
		return exec.CommandContext(ctx, java, "-cp", jar, src, host, port)
	})
}
