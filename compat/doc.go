// Package compat proves that go-workqueue can stand in for client-go's
// workqueue: its tests check at compile time that the types satisfy
// client-go's interfaces both ways, and run the same operations against
// both implementations, comparing what they observe. It is a module of its
// own so that the library never depends on client-go.
package compat
