package importer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Request says what to read.
type Request struct {
	PgBouncer string // DSN of PgBouncer's admin console
	PG        string // DSN of the PostgreSQL database
	CSVLogs   []string
	Pgbench   []string
	// Interval and Duration: the console is sampled every Interval, and
	// both live sources read for Duration.
	Interval, Duration time.Duration
	// Database is the database to import; "" = the busiest (PgBouncer's),
	// else the one --pg connects to.
	Database string
	// ConsoleRecord and PGRecord replay a saved sampling instead of reading
	// PgBouncer and PostgreSQL live.
	ConsoleRecord *ConsoleRecord
	PGRecord      *PGRecord
}

// Collected is what was read: the facts, the raw records of the live
// sources (to save), and notes on how the windows were lined up.
type Collected struct {
	Sources
	ConsoleRecord *ConsoleRecord
	PGRecord      *PGRecord
	Notes         []string
}

// Collect reads every source of req: the live ones at the same time for
// req.Duration, then the files, over the live window when there is one.
func Collect(ctx context.Context, req Request) (*Collected, error) {
	out := &Collected{ConsoleRecord: req.ConsoleRecord, PGRecord: req.PGRecord}
	if req.PgBouncer != "" || req.PG != "" {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		var errs [2]error
		if req.PgBouncer != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out.ConsoleRecord, errs[0] = SampleConsole(ctx, req.PgBouncer, req.Interval, req.Duration)
				if errs[0] != nil {
					cancel()
				}
			}()
		}
		if req.PG != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out.PGRecord, errs[1] = SamplePG(ctx, req.PG, req.Duration)
				if errs[1] != nil {
					cancel()
				}
			}()
		}
		wg.Wait()
		// The first real error, not the other source's cancellation.
		for _, e := range errs {
			if e != nil && !errors.Is(e, context.Canceled) {
				return nil, e
			}
		}
		if err := errors.Join(errs[:]...); err != nil {
			return nil, err
		}
	}
	var err error
	db := req.Database
	if out.ConsoleRecord != nil {
		if out.Console, err = AnalyzeConsole(out.ConsoleRecord, db); err != nil {
			return nil, err
		}
		db = out.Console.Database
	}
	if out.PGRecord != nil {
		if out.PG, err = AnalyzePG(out.PGRecord); err != nil {
			return nil, err
		}
		if db == "" {
			db = out.PG.Database
		} else if out.PG.Database != db {
			out.Notes = append(out.Notes, fmt.Sprintf("--pg reads database %s, the imported one is %s: its statement mix belongs to another database", out.PG.Database, db))
		}
	}
	var live Window
	switch {
	case out.Console != nil:
		live = out.Console.Window
	case out.PG != nil:
		live = out.PG.Window
	}
	if len(req.CSVLogs) > 0 {
		if out.Log, err = out.readLogs(req.CSVLogs, db, live); err != nil {
			return nil, err
		}
	}
	if len(req.Pgbench) > 0 {
		if out.Pgbench, err = out.readPgbench(req.Pgbench, live); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readLogs reads the server logs over the live window, or over their own
// span when there is no live source, their clock cannot be lined up, or
// they do not cover the window.
func (out *Collected) readLogs(files []string, db string, live Window) (*LogFacts, error) {
	opt := LogOptions{Database: db}
	if live.From.IsZero() {
		return AnalyzeLogs(files, opt)
	}
	opt.From, opt.To = live.From, live.To
	f, err := AnalyzeLogs(files, opt)
	switch {
	case err == nil && !f.ZoneKnown:
		out.Notes = append(out.Notes, "the csvlog's times have a zone abbreviation with no fixed offset (set log_timezone = 'UTC' to line them up): the whole log is read, not the live window")
	case errors.Is(err, ErrNoData):
		out.Notes = append(out.Notes, fmt.Sprintf("the csvlog has nothing in the live window %s (%v): the whole log is read", live, err))
	default:
		return f, err
	}
	opt.From, opt.To = time.Time{}, time.Time{}
	return AnalyzeLogs(files, opt)
}

// readPgbench reads the pgbench logs over the live window when they cover
// it, else over their own span.
func (out *Collected) readPgbench(files []string, live Window) (*PgbenchFacts, error) {
	if live.From.IsZero() {
		return AnalyzePgbench(files, time.Time{}, time.Time{})
	}
	f, err := AnalyzePgbench(files, live.From, live.To)
	if errors.Is(err, ErrNoData) {
		out.Notes = append(out.Notes, fmt.Sprintf("the pgbench log has nothing in the live window %s: its whole span is read", live))
		return AnalyzePgbench(files, time.Time{}, time.Time{})
	}
	return f, err
}
