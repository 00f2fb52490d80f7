// Package e2e tests Concord as real processes: the `concord` binary is
// built, started, killed and restarted by the tests.
package e2e
