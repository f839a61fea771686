package scenarios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"go.yaml.in/yaml/v3"
)

// Client classes and pools in YAML:
//
//	classes:
//	  web:
//	    pool: web
//	    workload: {clients: 300, requests_per_session: 100, ...}
//	    app_pool: {mode: queue, size: 10}
//	  report:
//	    pool: report
//	    workload: {clients: 1, ...}
//	pools:
//	  web:    {database: app, user: web, mode: transaction, size: 40}
//	  report: {database: app, user: report, mode: session, size: 3}
//
// A class starts from the scenario's workload: and app_pool: and changes
// what it sets; a key set at the top level later (or by --set, or a sweep)
// reaches every class that does not set it itself. Every key is reachable
// by its dotted path: classes.web.workload.clients, pools.web.size.

// classKeys are the keys of a class.
var classKeys = []string{"pool", "workload", "app_pool"}

// poolKeys are the keys of a pool.
var poolKeys = []string{"database", "user", "mode", "size"}

// ClassFields describes the class and pool keys (for help texts).
func ClassFields() []string {
	return []string{
		fmt.Sprintf("%-34s %s", "classes.NAME.pool", "the pool the class's clients connect to (a name under pools:)"),
		fmt.Sprintf("%-34s %s", "classes.NAME.workload.KEY", "the class's own workload.KEY (it starts from the scenario's workload:)"),
		fmt.Sprintf("%-34s %s", "classes.NAME.app_pool.KEY", "the class's own app_pool.KEY (it starts from the scenario's app_pool:)"),
		fmt.Sprintf("%-34s %s", "pools.NAME.database", "the pool's database (default: its name)"),
		fmt.Sprintf("%-34s %s", "pools.NAME.user", "the pool's user (default app)"),
		fmt.Sprintf("%-34s %s", "pools.NAME.mode", "the pool's pool_mode: direct | session | transaction | statement (default pooler.mode)"),
		fmt.Sprintf("%-34s %s", "pools.NAME.size", "the pool's pool_size (1..100000; default pooler.default_pool_size)"),
	}
}

// setterFor is how to set any key: a plain field (reaching every class
// that does not set it itself), a class's key, or a pool's.
func setterFor(key string) (func(*system.Config, *yaml.Node) error, bool) {
	switch {
	case strings.HasPrefix(key, "classes."):
		return classSetter(key)
	case strings.HasPrefix(key, "pools."):
		return poolSetter(key)
	}
	f, ok := lookup(key)
	if !ok {
		return nil, false
	}
	section, _, _ := strings.Cut(key, ".")
	if section != "workload" && section != "app_pool" {
		return f.set, true
	}
	return func(c *system.Config, n *yaml.Node) error {
		if err := f.set(c, n); err != nil {
			return err
		}
		for i := range c.Classes {
			cl := &c.Classes[i]
			if slices.Contains(cl.Set, key) {
				continue
			}
			if err := setInClass(cl, f, n); err != nil {
				return fmt.Errorf("class %s: %v", cl.Name, err)
			}
		}
		return nil
	}, true
}

// setInClass applies field f to a class's workload or app pool.
func setInClass(cl *system.Class, f field, n *yaml.Node) error {
	tmp := system.Default()
	tmp.Workload, tmp.AppPool = cl.Workload, cl.AppPool
	if err := f.set(&tmp, n); err != nil {
		return err
	}
	cl.Workload, cl.AppPool = tmp.Workload, tmp.AppPool
	return nil
}

// classSetter sets classes.NAME.pool or classes.NAME.(workload|app_pool).KEY.
func classSetter(key string) (func(*system.Config, *yaml.Node) error, bool) {
	rest := strings.TrimPrefix(key, "classes.")
	name, sub, ok := strings.Cut(rest, ".")
	if !ok || name == "" {
		return nil, false
	}
	find := func(c *system.Config) (*system.Class, error) {
		for i := range c.Classes {
			if c.Classes[i].Name == name {
				return &c.Classes[i], nil
			}
		}
		var names []string
		for _, cl := range c.Classes {
			names = append(names, cl.Name)
		}
		return nil, fmt.Errorf("no class %q (the classes are %s)", name, strings.Join(names, ", "))
	}
	if sub == "pool" {
		return func(c *system.Config, n *yaml.Node) error {
			cl, err := find(c)
			if err != nil {
				return err
			}
			v, err := scalar(n)
			cl.Pool = v
			return err
		}, true
	}
	f, ok := lookup(sub)
	if section, _, _ := strings.Cut(sub, "."); !ok || (section != "workload" && section != "app_pool") {
		return nil, false
	}
	return func(c *system.Config, n *yaml.Node) error {
		cl, err := find(c)
		if err != nil {
			return err
		}
		if err := setInClass(cl, f, n); err != nil {
			return err
		}
		if !slices.Contains(cl.Set, sub) {
			cl.Set = append(cl.Set, sub)
		}
		return nil
	}, true
}

// poolSetter sets pools.NAME.(database|user|mode|size).
func poolSetter(key string) (func(*system.Config, *yaml.Node) error, bool) {
	rest := strings.TrimPrefix(key, "pools.")
	name, field, ok := strings.Cut(rest, ".")
	if !ok || name == "" || !slices.Contains(poolKeys, field) {
		return nil, false
	}
	return func(c *system.Config, n *yaml.Node) error {
		var p *system.PoolSpec
		for i := range c.Pools {
			if c.Pools[i].Name == name {
				p = &c.Pools[i]
			}
		}
		if p == nil {
			var names []string
			for _, q := range c.Pools {
				names = append(names, q.Name)
			}
			return fmt.Errorf("no pool %q (the pools are %s)", name, strings.Join(names, ", "))
		}
		v, err := scalar(n)
		if err != nil {
			return err
		}
		switch field {
		case "database":
			p.Database = v
		case "user":
			p.User = v
		case "mode":
			m, err := poolmode.Parse(v)
			if err != nil {
				return suggestOn(err, v, []string{"direct", "session", "transaction", "statement"})
			}
			p.Mode, p.ModeSet = m, true
		case "size":
			x, err := intValue(n, 1, 100_000)
			if err != nil {
				return err
			}
			p.Size = int(x)
		}
		return nil
	}, true
}

// parseClasses reads the classes: block.
func (s *Scenario) parseClasses(m *yaml.Node) error {
	if m.Kind != yaml.MappingNode || len(m.Content) == 0 {
		return invalid(s.Source, m.Line, "classes must map class names to their settings (pool, workload, app_pool)")
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		for _, cl := range s.Base.Classes {
			if cl.Name == k.Value {
				return invalid(s.Source, k.Line, "class %q repeated", k.Value)
			}
		}
		if v.Kind != yaml.MappingNode {
			return invalid(s.Source, v.Line, "class %s must be a mapping of pool, workload and app_pool", k.Value)
		}
		s.Base.Classes = append(s.Base.Classes, system.Class{Name: k.Value, Workload: s.Base.Workload, AppPool: s.Base.AppPool})
		for j := 0; j+1 < len(v.Content); j += 2 {
			ck, cv := v.Content[j], v.Content[j+1]
			switch ck.Value {
			case "pool":
				if err := s.setNode("classes."+k.Value+".pool", cv); err != nil {
					return err
				}
			case "workload", "app_pool":
				if cv.Kind != yaml.MappingNode {
					return invalid(s.Source, cv.Line, "classes.%s.%s must be a mapping of its settings (%s)", k.Value, ck.Value, strings.Join(keysUnder(ck.Value), ", "))
				}
				seen := map[string]int{}
				for x := 0; x+1 < len(cv.Content); x += 2 {
					seen[cv.Content[x].Value] = cv.Content[x].Line
				}
				if l, msg := workersConflict(seen); ck.Value == "workload" && msg != "" {
					return invalid(s.Source, l, "classes.%s.%s", k.Value, msg)
				}
				for x := 0; x+1 < len(cv.Content); x += 2 {
					key := cv.Content[x].Value
					if _, ok := lookup(ck.Value + "." + key); !ok {
						return invalid(s.Source, cv.Content[x].Line, "unknown key %q in classes.%s.%s: want one of %s%s", key, k.Value, ck.Value,
							strings.Join(keysUnder(ck.Value), ", "), didYouMean(key, keysUnder(ck.Value)))
					}
					if err := s.setNode("classes."+k.Value+"."+ck.Value+"."+key, cv.Content[x+1]); err != nil {
						return err
					}
				}
			default:
				return invalid(s.Source, ck.Line, "unknown key %q in class %s: want pool, workload or app_pool%s", ck.Value, k.Value, didYouMean(ck.Value, classKeys))
			}
		}
	}
	return nil
}

// parsePools reads the pools: block.
func (s *Scenario) parsePools(m *yaml.Node) error {
	if m.Kind != yaml.MappingNode || len(m.Content) == 0 {
		return invalid(s.Source, m.Line, "pools must map pool names to their settings (database, user, mode, size)")
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		for _, p := range s.Base.Pools {
			if p.Name == k.Value {
				return invalid(s.Source, k.Line, "pool %q repeated", k.Value)
			}
		}
		if v.Kind != yaml.MappingNode {
			return invalid(s.Source, v.Line, "pool %s must be a mapping of database, user, mode and size", k.Value)
		}
		s.Base.Pools = append(s.Base.Pools, system.PoolSpec{Name: k.Value})
		for j := 0; j+1 < len(v.Content); j += 2 {
			pk := v.Content[j]
			if !slices.Contains(poolKeys, pk.Value) {
				return invalid(s.Source, pk.Line, "unknown key %q in pool %s: want database, user, mode or size%s", pk.Value, k.Value, didYouMean(pk.Value, poolKeys))
			}
			if err := s.setNode("pools."+k.Value+"."+pk.Value, v.Content[j+1]); err != nil {
				return err
			}
		}
	}
	return nil
}
