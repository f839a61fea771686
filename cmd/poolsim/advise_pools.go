package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/report"
)

// parseNeeds reads --features and --slo-p99: a plain value applies to
// every class (key ""), CLASS=VALUE to one class.
func parseNeeds(features, slos []string) (map[string]advise.Need, error) {
	needs := map[string]advise.Need{}
	split := func(v string) (string, string) {
		if k, rest, ok := strings.Cut(v, "="); ok && !strings.ContainsAny(k, ", ") {
			return k, rest
		}
		return "", v
	}
	for _, v := range features {
		class, list := split(v)
		fs, err := advise.ParseFeatures(list)
		if err != nil {
			return nil, usagef("--features %q: %v", v, err)
		}
		n := needs[class]
		n.Features = append(n.Features, fs...)
		needs[class] = n
	}
	for _, v := range slos {
		class, d := split(v)
		x, err := time.ParseDuration(d)
		if err != nil || x <= 0 {
			return nil, usagef("--slo-p99 %q: want a duration above 0 such as 50ms or 1.5s, or CLASS=DURATION", v)
		}
		n := needs[class]
		if n.SLOP99 != 0 {
			return nil, usagef("--slo-p99 %q: a second SLO for %s", v, classWord(class))
		}
		n.SLOP99 = x
		needs[class] = n
	}
	return needs, nil
}

func classWord(class string) string {
	if class == "" {
		return "every class"
	}
	return "class " + class
}

// advisePools is advise for a scenario with classes: a mode and size per
// pool under one server budget.
func advisePools(ctx context.Context, sc *scenarios.Scenario, base advise.Request, needs map[string]advise.Need, sf *studyFlags, st scenarios.Study,
	format, plotPath string, stdout, stderr io.Writer) error {
	if plotPath != "" {
		return usagef("--plot: not drawn for a scenario with classes yet (one plot per pool would be needed); use --format json")
	}
	per := map[string]advise.Need{}
	all := needs[""]
	for _, cl := range sc.Base.ClassList() {
		n := needs[cl.Name]
		n.Features = append(append([]compat.Feature(nil), all.Features...), n.Features...)
		if n.SLOP99 == 0 {
			n.SLOP99 = all.SLOP99
		}
		per[cl.Name] = n
	}
	for name := range needs {
		if _, ok := per[name]; !ok && name != "" {
			var names []string
			for _, cl := range sc.Base.ClassList() {
				names = append(names, cl.Name)
			}
			return usagef("%s=...: no class %q in %s (the classes are %s)", name, name, sc.Source, strings.Join(names, ", "))
		}
	}
	r := advise.PoolsRequest{Base: sc.Base, Needs: per, PoolSizes: base.PoolSizes, ServerCores: base.ServerCores, Spindles: base.Spindles}
	n := 0
	a, err := advise.Pools(r, func(cfgs []system.Config) ([]advise.Outcome, error) {
		n++
		pts := make([]scenarios.Point, len(cfgs))
		for i, c := range cfgs {
			pts[i] = scenarios.Point{Config: c}
		}
		if n == 1 {
			// The first pool's batch stands for each pool's.
			all := pts
			for range len(r.Base.PoolList()) - 1 {
				all = append(all, pts...)
			}
			if err := sf.checkCost(sc, all, st); err != nil {
				return nil, err
			}
		}
		rows, err := sf.run(ctx, pts, st, stderr, "advise "+sc.Name)
		if err != nil {
			return nil, err
		}
		out := make([]advise.Outcome, len(rows))
		for i := range rows {
			out[i].Total = rows[i].Reps
			for _, c := range rows[i].Classes {
				out[i].Classes = append(out[i].Classes, c.Reps)
			}
		}
		return out, nil
	})
	if err != nil {
		var ue usageError
		if ctx.Err() != nil || errors.As(err, &ue) {
			return err
		}
		return usage(err)
	}
	in := report.PoolsAdviceInput{Scenario: sc.Name, Seed: sc.Base.Seed, Advice: a, Study: st}
	if format == "json" {
		return report.WritePoolsAdviceJSON(stdout, in)
	}
	return report.WritePoolsAdviceText(stdout, in)
}
