"""The tests of tf1prune: one folder per subpackage, helpers in support/.

A package, so that test files of one name in two folders do not collide and
`tests.support` imports from the checkout root (bench/ uses it too).
"""
