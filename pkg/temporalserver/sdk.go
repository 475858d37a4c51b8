package temporalserver

import "go.temporal.io/api/workflowservice/v1"

func describe(ns string) *workflowservice.DescribeNamespaceRequest {
	return &workflowservice.DescribeNamespaceRequest{Namespace: ns}
}

// quiet is an SDK logger that drops everything: the readiness probe's
// failed dials are expected.
type quiet struct{}

func (quiet) Debug(string, ...interface{}) {}
func (quiet) Info(string, ...interface{})  {}
func (quiet) Warn(string, ...interface{})  {}
func (quiet) Error(string, ...interface{}) {}
