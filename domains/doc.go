// Package domains holds example domains built on eventstore; each lives in
// its own package: domains/bankaccount (a ledger with an overdraft limit,
// closing and refunds), domains/order (placed, paid, shipped, delivered,
// refunded), domains/todo (created, updated, deleted) and domains/transfer
// (a money transfer between two bank accounts: its request and its
// outcome).
package domains
