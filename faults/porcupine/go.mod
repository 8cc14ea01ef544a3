module etcdlock/faults/porcupine

go 1.26.8

require github.com/anishathalye/porcupine v1.3.1
