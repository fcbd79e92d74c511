// Package domains holds example domains built on eventstore; each lives in
// its own package (domains/bankaccount).
package domains
