// Package docs holds the design document (DESIGN.md) and the test that keeps
// the code's citations of it true.
package docs
