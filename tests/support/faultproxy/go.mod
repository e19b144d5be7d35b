module star.dev/star-faultproxy

go 1.26.0
