package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"
)

// table is rows under a header; wide columns are shown with -o wide only.
type table struct {
	header []string
	wide   []bool
	rows   [][]string
}

// print writes v as JSON or YAML, or t as a table.
func print(w io.Writer, format string, v any, t table) error {
	switch format {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	tw := printers.GetNewTabWriter(w)
	line := func(cells []string) {
		var out []string
		for i, c := range cells {
			if i < len(t.wide) && t.wide[i] && format != "wide" {
				continue
			}
			out = append(out, c)
		}
		fmt.Fprintln(tw, strings.Join(out, "\t"))
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
	return tw.Flush()
}

func ms(d time.Duration) string {
	if d == 0 {
		return "0ms"
	}
	return d.Round(100 * time.Microsecond).String()
}

func age(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
