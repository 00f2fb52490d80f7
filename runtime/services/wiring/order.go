package wiring

import (
	"fmt"
	"slices"
	"strings"
)

// Order returns roles in the order they build: a role after every role
// giving a port it needs or uses, otherwise in the order given (the
// table's). given are the ports the root gave. A role needing a port
// that neither the root nor any of roles gives, or roles whose needs
// form a cycle, is an error naming the port: the process does not start.
func Order(roles []Role, given []string) ([]Role, error) {
	have := map[string]bool{}
	for _, p := range given {
		have[p] = true
	}
	givers := map[string][]string{}
	for _, r := range roles {
		for _, p := range r.Gives {
			givers[p] = append(givers[p], r.Name)
		}
	}
	for _, r := range roles {
		for _, p := range r.Needs {
			if !have[p] && len(givers[p]) == 0 {
				return nil, fmt.Errorf("role %s needs port %q, which neither the process nor any of its roles (%s) gives",
					r.Name, p, names(roles))
			}
		}
	}
	// ready reports whether every role giving a port r needs or uses is
	// built already (a role does not wait on itself).
	built := map[int]bool{}
	ready := func(i int) bool {
		r := roles[i]
		for _, p := range slices.Concat(r.Needs, r.Uses) {
			for j, o := range roles {
				if j != i && !built[j] && slices.Contains(o.Gives, p) {
					return false
				}
			}
		}
		return true
	}
	out := make([]Role, 0, len(roles))
	for len(out) < len(roles) {
		next := -1
		for i := range roles {
			if !built[i] && ready(i) {
				next = i
				break
			}
		}
		if next < 0 {
			for i, r := range roles {
				if built[i] {
					continue
				}
				for _, p := range slices.Concat(r.Needs, r.Uses) {
					if len(givers[p]) > 0 && !have[p] {
						return nil, fmt.Errorf("role %s needs port %q, given by %s, which needs a port %s gives: a cycle",
							r.Name, p, strings.Join(givers[p], ", "), r.Name)
					}
				}
			}
			return nil, fmt.Errorf("roles %s: no order builds each after the ports it needs", names(roles))
		}
		built[next] = true
		for _, p := range roles[next].Gives {
			have[p] = true
		}
		out = append(out, roles[next])
	}
	return out, nil
}

func names(roles []Role) string {
	var n []string
	for _, r := range roles {
		n = append(n, r.Name)
	}
	return strings.Join(n, ", ")
}
