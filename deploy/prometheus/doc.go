// Package prometheus holds no Go code: this directory ships the Prometheus
// recording and alert rules for presence serve (presence.rules.yml) and
// their promtool unit tests (presence.rules_test.yml). Its Go test,
// TestAlertRules, runs `promtool test rules` and checks that every alert is
// shown both firing and not firing. docs/production.md explains each alert.
package prometheus
