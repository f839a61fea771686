package scenarios

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/system"
	"go.yaml.in/yaml/v3"
)

// Every PgBouncer setting the model applies (system.AppliedPoolingKeys) is
// a scenario key pooler.<its pgbouncer.ini name>. Those with a field of
// their own above (a range, a default of the model's, a longer doc) keep
// it; each other one gets a field here, parsed by its type in
// poolconf.Pooling, so that a setting added there and applied by the model
// needs nothing in this package.

// poolingAlias is the scenario key of an applied key whose name differs.
var poolingAlias = map[string]string{"pool_mode": "pooler.mode"}

// poolingKey is the scenario key of a poolconf.Pooling key.
func poolingKey(key string) string {
	if k, ok := poolingAlias[key]; ok {
		return k
	}
	return "pooler." + key
}

func init() {
	last := 0
	for i, f := range fields {
		if strings.HasPrefix(f.key, "pooler.") {
			last = i
		}
	}
	var add []field
	for _, key := range system.AppliedPoolingKeys {
		if _, ok := lookup(poolingKey(key)); ok {
			continue
		}
		add = append(add, poolingField(key))
	}
	fields = slices.Insert(fields, last+1, add...)
}

// poolingField is the scenario field of a poolconf.Pooling key, parsed by
// the type of its field.
func poolingField(key string) field {
	def := poolconf.DefaultPooling()
	ptr, ok := def.Field(key)
	if !ok {
		panic("scenarios: system.AppliedPoolingKeys names " + key + ", not a poolconf.Pooling key") // caught by TestAppliedPoolingKeys
	}
	text, _ := def.Text(key)
	what := poolconf.PoolingDoc(key)
	var doc string
	switch ptr.(type) {
	case *int:
		doc = fmt.Sprintf("%s (PgBouncer's %s: a whole number, 0 or more; default %s)", what, key, text)
	case *time.Duration:
		doc = fmt.Sprintf("%s (PgBouncer's %s: a duration; default %ss)", what, key, text)
	case *bool:
		doc = fmt.Sprintf("%s (PgBouncer's %s: true or false; default %v)", what, key, text == "1")
	default:
		doc = fmt.Sprintf("%s (PgBouncer's %s; default %q)", what, key, text)
	}
	return field{key: poolingKey(key), doc: doc, set: func(c *system.Config, n *yaml.Node) error {
		ptr, _ := c.Pooler.Pooling.Field(key)
		switch p := ptr.(type) {
		case *int:
			v, err := intValue(n, 0, math.MaxInt32)
			*p = int(v)
			return err
		case *time.Duration:
			return durationInto(p, n)
		case *bool:
			return boolInto(p, n)
		case *string:
			s, err := scalar(n)
			*p = s
			return err
		}
		return fmt.Errorf("%s: a setting of a type scenarios cannot read", key)
	}}
}
