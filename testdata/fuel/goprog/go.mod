module github.com/edgeaip/edgeaip/testdata/fuel/goprog

go 1.26
