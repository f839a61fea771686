//go:build tools

package deps

import (
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/pgproto3"
	_ "github.com/spf13/pflag"
	_ "go.yaml.in/yaml/v3"
	_ "gonum.org/v1/gonum/optimize"
	_ "gonum.org/v1/plot"
	_ "github.com/olekukonko/tablewriter"
	_ "go.uber.org/goleak"
)
