// Package closesql holds the text of the close path's SQL: the statements
// on the shop's tables, rendered once per order schema (Render, Default),
// and the constant statements on the executor's own tables (close log,
// dead letters, capped runs' cursors, close-run records, the dead-letter
// gauge), and the operators' order view's reads of a declared schema
// (RenderView). It is text only: package orders runs every statement of the
// close, each in the one store method that binds its parameters, orders/inspect
// the view's, and this package makes no database call.
//
// Each statement's comment says what it reads and locks and why, and the
// rows its caller expects: the statement and the reason for its shape stay
// together wherever the code that runs it lives. orders' plan tests
// (TestHotStatementPlans, TestForeignSchemaStatementPlans) run every one
// of them against true and lying statistics.
package closesql
